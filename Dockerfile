# The ledger service image: one image, the role chosen by the command (see docker-compose.yml).
FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production LEDGER_HOST=0.0.0.0 LEDGER_DATA_DIR=/data
COPY package.json package-lock.json ./
# the system Node here is 24, so the pinned `node` devDependency is not needed at runtime
RUN npm ci --omit=dev --no-audit --no-fund
COPY bin ./bin
COPY src ./src
COPY layers ./layers
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080 4000
ENTRYPOINT ["node", "bin/ledger.js"]
CMD ["serve"]
