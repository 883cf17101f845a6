"""What a platform engineer installs: the manifests and their layers, the CRDs, RBAC, the
status fence (its CEL evaluated as the API server does), the overlays, the Helm chart
(``-m helm`` runs helm itself), the image without Docker, the workflows and the lock file.
"""
