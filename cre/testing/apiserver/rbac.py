"""Authentication by bearer token and RBAC authorization, as kube-apiserver does them.

Off by default (every request is the emulator's administrator, as before), so the rest of the
test suite is untouched. With enforcement on (``serve(rbac=True)``, ``--rbac`` on the CLI):

* the kubeconfig's token is the administrator (group ``system:masters``: everything allowed);
  tokens minted by the TokenRequest API (``POST .../serviceaccounts/{name}/token``, in JSON
  or, as ``kubectl create token`` sends it, protobuf) or by
  :meth:`Rbac.mint` authenticate as ``system:serviceaccount:{ns}:{name}`` with the
  groups ``system:serviceaccounts``, ``system:serviceaccounts:{ns}`` and
  ``system:authenticated``; any other token is ``401 Unauthorized``; no token is
  ``system:anonymous``;
* a resource request is allowed when a ClusterRoleBinding (anywhere) or a RoleBinding in the
  request's namespace binds a subject matching the user to a (Cluster)Role with a rule matching
  the request, by the rules of the RBAC authorizer: verbs, apiGroups and resources each match
  exactly or by ``*``; a subresource is matched as ``resource/subresource`` (or ``*/sub``);
  non-empty resourceNames require the request's name (so never match a create or a list); a
  ServiceAccount subject without a namespace takes the RoleBinding's;
* non-resource URLs (discovery, ``/version``, ``/openapi``, health) are allowed for every
  authenticated user, as the default ``system:discovery`` and ``system:public-info-viewer``
  bindings allow them;
* a denial is a 403 ``Forbidden`` Status with the real message (``pods "p" is forbidden: User
  "..." cannot get resource "pods/log" in API group "" in the namespace "ns"``).

Aggregated ClusterRoles (``aggregationRule``) and the bootstrap roles are not modelled.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from . import errors
from .errors import ApiError, Qualified
from .store import Store

ADMIN_TOKEN = "cre-emulator"
RBAC_GROUP = "rbac.authorization.k8s.io"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@attrs.frozen
class User:
    name: str
    groups: tuple[str, ...] = ()


ADMIN = User("cre-emulator-admin", (MASTERS, AUTHENTICATED))
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def service_account_user(namespace: str, name: str) -> User:
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


@attrs.frozen
class Attributes:
    """What the authorizer decides on (``resource`` empty: a non-resource ``path``)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


def unauthorized() -> ApiError:
    return ApiError(code=401, reason=errors.Reason.UNAUTHORIZED, message="Unauthorized")


class Rbac:
    """Tokens and the authorization decision over the stored RBAC objects."""

    def __init__(self, store: Store, *, enforce: bool = False) -> None:
        self.store = store
        self.enforce = enforce
        self._tokens: dict[str, User] = {ADMIN_TOKEN: ADMIN}
        self._minted = 0

    def mint(self, namespace: str, name: str) -> str:
        """A new bearer token for the service account ``namespace/name``."""
        self._minted += 1
        who = base64.urlsafe_b64encode(f"{namespace}/{name}".encode()).decode().rstrip("=")
        token = f"emu-sa.{who}.{self._minted}"
        self._tokens[token] = service_account_user(namespace, name)
        return token

    def authenticate(self, authorization: str | None) -> User:
        """The user of a request's ``Authorization`` header (401 for an unknown token when
        enforcing; without enforcement every request is the administrator)."""
        token = ""
        if authorization and authorization[:7].lower() == "bearer ":
            token = authorization[7:].strip()
        user = self._tokens.get(token) if token else None
        if not self.enforce:
            return user or ADMIN
        if user is None:
            if token:
                raise unauthorized()
            return ANONYMOUS
        return user

    def authorize(self, user: User, a: Attributes) -> None:
        """Raise the real 403 unless ``user`` may do ``a`` (no-op when not enforcing)."""
        if not self.enforce or self.allowed(user, a):
            return
        raise forbidden(user, a)

    def allowed(self, user: User, a: Attributes) -> bool:
        if MASTERS in user.groups:
            return True
        if not a.resource:
            return AUTHENTICATED in user.groups
        for binding in self._objects("clusterrolebindings"):
            if _binds(binding, user, namespace="") and _allows(
                    self._role(binding, namespace=""), a):
                return True
        if a.namespace:
            for binding in self._objects("rolebindings", a.namespace):
                if _binds(binding, user, namespace=a.namespace) and _allows(
                        self._role(binding, namespace=a.namespace), a):
                    return True
        return False

    def _objects(self, plural: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        bucket = self.store.buckets.get((RBAC_GROUP, plural))
        if bucket is None:
            return ()
        return [obj for key, obj in bucket.objects.items()
                if namespace is None or key[0] == namespace]

    def _role(self, binding: Mapping[str, Any], *, namespace: str) -> Mapping[str, Any] | None:
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole":
            return self.store.get((RBAC_GROUP, "clusterroles"), ("", str(ref.get("name"))))
        if ref.get("kind") == "Role" and namespace:
            return self.store.get((RBAC_GROUP, "roles"), (namespace, str(ref.get("name"))))
        return None


def _binds(binding: Mapping[str, Any], user: User, *, namespace: str) -> bool:
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User" and name == user.name:
            return True
        if kind == "Group" and name in user.groups:
            return True
        if kind == "ServiceAccount":
            ns = subject.get("namespace") or namespace
            if ns and user.name == f"system:serviceaccount:{ns}:{name}":
                return True
    return False


def _allows(role: Mapping[str, Any] | None, a: Attributes) -> bool:
    return role is not None and any(rule_matches(rule, a) for rule in role.get("rules") or [])


def rule_matches(rule: Mapping[str, Any], a: Attributes) -> bool:
    """One PolicyRule against a resource request (``rbac/v1`` helpers' semantics)."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and a.verb not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a.group not in groups:
        return False
    resources = rule.get("resources") or []
    combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if not ("*" in resources or combined in resources
            or (a.subresource and f"*/{a.subresource}" in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


def forbidden_message(user: User, a: Attributes) -> str:
    """``forbiddenMessage`` of kube-apiserver's response writers."""
    if not a.resource:
        return f'User "{user.name}" cannot {a.verb} path "{a.path}"'
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = (f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope")
    return (f'User "{user.name}" cannot {a.verb} resource "{resource}" in API group '
            f'"{a.group}" {where}')


def forbidden(user: User, a: Attributes) -> ApiError:
    why = forbidden_message(user, a)
    if not a.resource:
        return ApiError(code=403, reason=errors.Reason.FORBIDDEN, message=f"forbidden: {why}",
                        details={})
    return errors.forbidden(Qualified(group=a.group, resource=a.resource, kind=""), a.name, why)
