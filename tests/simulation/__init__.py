"""The simulated cluster and what it proves: the simulated Metacontroller and OME's manager
checked against their sources, models' whole lives beside OME (costs included), the
label race, answers fed back, and Sieve's perturbations (``-m exploration``).
"""
