"""A kopf operator: each Tenant gets a Namespace ``tenant-<name>``, labelled as it says.

The Namespace is cluster-scoped and the Tenant is not, so an owner reference cannot tie them:
the delete handler (and the finalizer kopf adds for it) removes the Namespace before the Tenant
goes. Run it with ``kopf run -m tenants.handlers``.
"""
