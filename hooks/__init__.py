"""Metacontroller hook for OME BaseModels and ClusterBaseModels stored on PVCs."""
