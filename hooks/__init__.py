"""Metacontroller hook for OME BaseModels and ClusterBaseModels stored on PVCs."""

# The one place the version is written: pyproject.toml reads it from here, and the
# tests hold the manifests' image tag and the CHANGELOG to it.
__version__ = "0.1.0"
