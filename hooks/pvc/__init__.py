"""The PVC flow: the storage URI, the claim, the metadata Job and its outcome."""
