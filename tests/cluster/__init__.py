"""The cluster tier: the product against a real Kubernetes control plane, OME's real manager
and metadata agent, and the hook as users run it, all as processes on 127.0.0.1.

pytest marker ``cluster``, deselected by default; ``python -m pytest -m cluster`` runs it and
``.ci/run`` runs it after the fast suite. Its modules, in the order a run uses them:

- ``builds``: the binaries, from published Go modules (``kubernetes/``, ``etcd/``, ``ome/``
  here), cached outside the checkout by version;
- ``control_plane``: etcd, kube-apiserver and kube-controller-manager, with one token per
  actor and an audit log; ``api``: a client of that API server;
- ``ome_manager``: OME's CRDs, namespace, ConfigMap, RBAC and its real controller manager;
- ``hook_server`` and ``hook_proxy``: ``basemodel-hook serve``, and the pass-through in
  front of it that counts calls per model and can hold an answer;
- ``kubelet``: the scheduler's and a kubelet's part for the Jobs' pods, running the real
  ``ome-agent`` with the pod's own arguments and credentials; ``model_files``: what it reads;
- ``api_server_cluster`` and ``real_time``: the product's simulator of Metacontroller
  (``tests/metacontroller/``) driving the real API server in real time;
  ``metacontroller_binary``: a real Metacontroller instead, when ``METACONTROLLER_BIN`` names one;
- ``tier``: the world those make, and the install as docs/install.md says; ``existing``:
  OME models that predate the hook; ``audit``: what the audit log counts, per actor and model,
  and what each of Metacontroller's writes of a model changed;
- ``test_ome_crd_chart``: OME's ``ome-crd`` chart upgraded over the hook's CRDs with Helm 4
  and Helm 3 (``tests/helm.py`` pins both), each on a control plane of its own.
"""
