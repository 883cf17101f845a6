"""The project's tests, grouped by what each proves (each group's ``__init__`` says more):

- ``decision``: the pure core, one request at a time, with no simulator;
- ``hook``: the HTTP shell, the CLI, the saved requests and answers (``fixtures/``), metrics;
- ``properties``: properties over every request Hypothesis draws;
- ``install``: manifests, CRDs, RBAC, the status fence, overlays, the chart, the image, workflows;
- ``documentation``: what the README and docs promise, the reference folder, any date;
- ``simulation``: the simulated Metacontroller and OME, and models' whole lives in them;
- ``cluster``: the real control plane (marker ``cluster``).

Tests live only in those groups. The modules at this level are helpers they share, some of
them commands too (``python -m tests.lifecycle``, ``tests.golden``, ``tests.years_ahead``,
``tests.fetch_reference``); ``metacontroller/`` is the simulator.
"""
