"""The node flow: OME's model agents report per node through ConfigMaps."""
