"""Properties of the hook over every request Hypothesis draws (``tests/strategies.py``): made
consistent as the API server would return them (the simulated API server stamps uids,
resourceVersions and owner references), then often damaged. No input gets a 5xx, loses
work or an answer that Metacontroller would refuse.
"""
