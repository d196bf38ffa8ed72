# syntax=docker/dockerfile:1
# The self-hosted gateway (docs/selfhost.md): the Worker built from this clone, run by
# scripts/serve.sh on the pinned workerd (the npm package), Durable Objects as SQLite in /data.
#
#   docker build -t resilient-llm .          (scripts/check-image.sh builds and smoke-tests it)
#   docker run -p 127.0.0.1:8787:8787 -v rl-state:/data -v "$PWD/deploy:/config:ro" \
#     -e ANTHROPIC_API_KEY -e OPENAI_API_KEY -e GATEWAY_KEY resilient-llm --config /config/providers.json
#
# Arguments after the image name go to scripts/serve.sh (--config FILE, --secret NAME, ...);
# secrets come from the container's environment only. compose.yaml is a complete example.
# workerd needs glibc: Debian images in both stages.

# ---- build: Rust + Node, the project's pinned tools (scripts/setup.sh), the Worker ----
FROM node:22-bookworm-slim AS node
FROM rust:1.95-bookworm AS build
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm
ENV RESILIENT_LLM_TOOLS=/opt/resilient-llm/tools CARGO_TARGET_DIR=/opt/resilient-llm/target
WORKDIR /src
# The tools and node_modules first: a layer that changes only with these files.
COPY package.json package-lock.json ./
COPY scripts/setup.sh scripts/
RUN scripts/setup.sh --no-browser --no-python
COPY . .
RUN scripts/build-worker.sh
# What the runtime needs: the build, the two scripts, wrangler.toml, and of node_modules only
# workerd (its platform package holds the binary) and the TOML parser.
RUN mkdir -p /out/scripts /out/node_modules/@cloudflare \
 && cp -a build wrangler.toml package.json LICENSE-MIT LICENSE-APACHE /out/ \
 && cp -a scripts/serve.sh scripts/selfhost-config.mjs scripts/selfhost-health.mjs /out/scripts/ \
 && cp -a node_modules/workerd node_modules/smol-toml /out/node_modules/ \
 && rm -f /out/node_modules/workerd/bin/workerd \
 && cp -a node_modules/@cloudflare/workerd-linux-* /out/node_modules/@cloudflare/

# ---- runtime: Node (for the configuration generator) and workerd ----
FROM node:22-bookworm-slim
WORKDIR /app
COPY --from=build /out/ /app/
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 8787
# GET /health with the client key from GATEWAY_KEY (or the variable HEALTHCHECK_KEY_ENV names).
HEALTHCHECK --interval=30s --timeout=6s --start-period=20s --retries=3 \
  CMD ["node", "scripts/selfhost-health.mjs", "http://127.0.0.1:8787/health"]
# The same command the tests run (tests/e2e/selfhost.test.mjs); workerd replaces the shell and
# stops cleanly on SIGTERM (docker stop).
ENTRYPOINT ["scripts/serve.sh", "--no-build", "--listen", "0.0.0.0:8787", "--state", "/data"]
CMD []
