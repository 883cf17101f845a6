# ome-basemodel-hook: Metacontroller sync hook for OME BaseModels on PVCs.
#
#   docker build -t ghcr.io/ome-basemodel-hook/ome-basemodel-hook:VERSION .
#
# VERSION is hooks/__init__.py's __version__; the release workflow builds and
# pushes it for the tag vVERSION. The Python is the oldest pyproject.toml's
# requires-python allows.
# Pin the base image by digest in production (--build-arg PYTHON_IMAGE=...@sha256:...).
ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: a venv holding the dependencies and the package ---------------
FROM ${PYTHON_IMAGE} AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

RUN python -m venv /opt/venv

WORKDIR /src

# Dependencies first, in their own layer: it is rebuilt only when the lock
# changes, not on every code change. Every package is pinned by version and hash.
COPY requirements.lock ./
RUN pip install -r requirements.lock --require-hashes

# Then the package itself (README.md is the project's readme in pyproject.toml).
COPY pyproject.toml ./
COPY README.md ./
COPY hooks/ ./hooks/
RUN pip install --no-deps . \
 && pip uninstall -y pip setuptools

# --- runtime: the venv on a clean base, no build tools, non-root -------------
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="ome-basemodel-hook" \
      org.opencontainers.image.description="Metacontroller hook for OME BaseModels and ClusterBaseModels on PVCs" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH

COPY --from=builder /opt/venv /opt/venv

# Numeric, so Kubernetes can verify runAsNonRoot; matches the Deployment.
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080

ENTRYPOINT ["basemodel-hook"]
CMD ["serve", "--bind", "0.0.0.0:8080"]
