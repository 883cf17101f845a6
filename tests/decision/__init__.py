"""The pure core: what the hook decides from one request, and the parts it decides with.

Each test calls ``hooks`` directly, with plain data and an injected clock, and imports
nothing of the simulators (``test_imports`` checks it in a fresh interpreter): no CEL, no
Kubernetes schemas beyond ``tests/schemas.py``'s checks of what the hook builds.
"""
