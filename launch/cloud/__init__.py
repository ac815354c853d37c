"""Launching a program on Google Cloud (Vertex AI), one module per role:

  options.py     what each node group asks for (`CloudOptions`, one flag
                 each) and who can reach the job
  capacity.py    the replay's memory and load, from this project's
                 measurements
  machines.py    each node group's machine request, and the plan's checks
  compatibility.py  which machine takes how many of which GPU (Vertex AI's
                 published table), and the check against it
  costs.py       each worker pool's vCPUs, memory, GPUs and price an hour,
                 and the regional quotas the job needs
  packaging.py   the containers: requirements, staged code, Launchpad's
                 launcher run with them
  dry_run.py     --dry_run: the packaged job kept with its job.json
  printing.py    the plan --dry_run prints
  submission.py  submitting the job through xmanager, as `CloudOptions` says
  watching.py    a submitted job watched, and the run submitted again when
                 the job fails or reaches its time limit (programs/watch.py)
"""
