"""What a launch takes of the machine it runs on.

  private_network.py  a local launch's own network namespace (loopback
                      only), made before anything starts
  placement.py        how the processes share the cores: thread pools,
                      CPUs, the evaluator's nice (--placement, --pin_*)

It imports nothing else of `launch`.
"""
