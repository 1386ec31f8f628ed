"""``berth console``: a web application over the fleet, read from etcd.

- ``views``: the small shapes the console keeps of each stored document;
- ``fleet``: what it keeps (informers over etcd, a bounded history of metric
  values, the version its pages are at, whether etcd answers);
- ``pages``: each page's data, built from a frozen snapshot of the fleet (and,
  for one application, from etcd), with the CLI's own functions where the CLI
  shows the same thing;
- ``server``: the HTTP application (Starlette on uvicorn), its credentials and
  its stream of changes; ``static/``: the page, its script and the charting
  library, shipped in the package.

It writes nothing but an operator's rollout controls (approve, pause, resume),
and only for a request that carries the console's credential.
"""
