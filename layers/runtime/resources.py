"""What an agent's tools need from AWS, declared beside them: tables, grants on existing resources, secrets.

An agent lists these in ``Agent.resources``. At synth time the stack reads the declarations and
turns them into least-privilege grants on the functions that run that agent's tool code (its
CallTool and CheckCondition), and nothing else: another agent's functions get none of them. At
run time the tools find each resource's physical id in their function's environment
(``longstep.environment``), in a variable whose name is derived from the resource's name::

    orders = Table("orders", partition_key="order_id")
    api_key = Secret("payments_api", secret_id="prod/payments/api-key")

    def tool(args, ctx):
        clients.client("dynamodb").get_item(TableName=orders.table_name, ...)
        token = api_key.value()
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Union

from longstep import clients, environment
from longstep.keys import TableSchema
from longstep.settings import ENV_AGENT as ENV_AGENT, SECRET_VARIABLE_PREFIX, TABLE_VARIABLE_PREFIX


# A resource name: becomes part of an environment variable name and of a construct id.
NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
ACTION = re.compile(r"^[a-z0-9-]+:[A-Za-z0-9*]+$")

# Item-level DynamoDB actions (no Scan: reading a whole table is declared, never implied).
READ_ITEM_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:ConditionCheckItem")
WRITE_ITEM_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
READ_WRITE_ITEM_ACTIONS = READ_ITEM_ACTIONS + WRITE_ITEM_ACTIONS
SCAN_ACTIONS = ("dynamodb:Scan",)


class ResourceDeclarationError(ValueError):
    """A resource declaration is invalid; the message names the field."""


class UnboundResourceError(RuntimeError):
    """A declared resource's variable is missing from the function's environment (a function of
    another agent, or a stack built without the declaration)."""


def table_variable(name: str) -> str:
    """The environment variable holding the physical name of the table declared as ``name``."""
    return TABLE_VARIABLE_PREFIX + name.upper()


def secret_variable(name: str) -> str:
    """The environment variable holding the id (name or ARN) of the secret declared as ``name``."""
    return SECRET_VARIABLE_PREFIX + name.upper()


def _check_name(kind: str, name: object) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise ResourceDeclarationError(f"{kind}.name: expected lower-case letters, digits and _ (starting with a letter), got {name!r}")


def _check_actions(kind: str, actions: object, service: str | None = None) -> tuple[str, ...]:
    if isinstance(actions, str) or not isinstance(actions, (tuple, list)) or not actions:
        raise ResourceDeclarationError(f"{kind}.actions: expected a non-empty tuple of IAM actions, got {actions!r}")
    for action in actions:
        if not isinstance(action, str) or not ACTION.match(action):
            raise ResourceDeclarationError(f"{kind}.actions: {action!r} is not an IAM action ('service:Action')")
        if service and not action.startswith(f"{service}:"):
            raise ResourceDeclarationError(f"{kind}.actions: {action!r} is not a {service} action")
    return tuple(dict.fromkeys(actions))


def _bound(variable: str, what: str) -> str:
    value = environment.get(variable).strip()
    if not value:
        raise UnboundResourceError(f"{what}: environment variable {variable} is not set (is it declared in this agent's resources?)")
    return value


@dataclass(frozen=True)
class Table:
    """A DynamoDB table the stack creates for the agent (on-demand, point-in-time recovery, encrypted).

    Attributes:
        name: the table's name within the agent (``orders``); the physical name is the stack's.
        partition_key: name of the string partition key.
        sort_key: name of the string sort key, or None.
        actions: what the agent's functions may do to it (item reads and writes by default;
            add ``SCAN_ACTIONS`` to read it whole).
        ttl_attribute: an attribute DynamoDB TTL reads (epoch seconds), or None.
    """

    name: str
    partition_key: str
    sort_key: str | None = None
    actions: tuple[str, ...] = READ_WRITE_ITEM_ACTIONS
    ttl_attribute: str | None = None

    def __post_init__(self) -> None:
        _check_name("Table", self.name)
        if not isinstance(self.partition_key, str) or not self.partition_key:
            raise ResourceDeclarationError(f"Table.partition_key: table {self.name!r} needs a partition key name")
        object.__setattr__(self, "actions", _check_actions("Table", self.actions, "dynamodb"))

    @property
    def variable(self) -> str:
        """The environment variable the physical name is read from."""
        return table_variable(self.name)

    @property
    def table_name(self) -> str:
        """The table's physical name, from the current function's environment.

        Raises:
            UnboundResourceError: this function was not given the table.
        """
        return _bound(self.variable, f"table {self.name!r}")

    def schema(self) -> TableSchema:
        """The table's key layout (what the stack, and a local stack, create it with)."""
        return TableSchema(partition_key=self.partition_key, sort_key=self.sort_key, ttl_attribute=self.ttl_attribute)


@dataclass(frozen=True)
class Grant:
    """Existing resources the agent's tools may use, with exactly these actions.

    Attributes:
        actions: IAM actions (``"sqs:SendMessage"``).
        resources: the resources' ARNs (a trailing ``*`` only where the service needs it).
    """

    actions: tuple[str, ...]
    resources: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "actions", _check_actions("Grant", self.actions))
        resources = self.resources
        if isinstance(resources, str) or not isinstance(resources, (tuple, list)) or not resources:
            raise ResourceDeclarationError(f"Grant.resources: expected a non-empty tuple of ARNs, got {resources!r}")
        for arn in resources:
            if not isinstance(arn, str) or not arn.startswith("arn:") or arn.count(":") < 5:
                raise ResourceDeclarationError(f"Grant.resources: {arn!r} is not an ARN")
        object.__setattr__(self, "resources", tuple(dict.fromkeys(resources)))


_secret_values: dict[str, str] = {}
_secret_lock = threading.Lock()


@dataclass(frozen=True)
class Secret:
    """A Secrets Manager secret the agent's tools may read (``secretsmanager:GetSecretValue`` only).

    Attributes:
        name: the secret's name within the agent (``payments_api``).
        secret_id: the secret's name or full ARN in Secrets Manager.
    """

    name: str
    secret_id: str

    def __post_init__(self) -> None:
        _check_name("Secret", self.name)
        if not isinstance(self.secret_id, str) or not self.secret_id.strip():
            raise ResourceDeclarationError(f"Secret.secret_id: secret {self.name!r} needs a secret name or ARN")

    @property
    def variable(self) -> str:
        """The environment variable the secret's id is read from."""
        return secret_variable(self.name)

    @property
    def is_arn(self) -> bool:
        return self.secret_id.startswith("arn:")

    @property
    def bound_id(self) -> str:
        """The secret's id, from the current function's environment.

        Raises:
            UnboundResourceError: this function was not given the secret.
        """
        return _bound(self.variable, f"secret {self.name!r}")

    def value(self) -> str:
        """The secret's string, fetched on first use and cached for the life of the process."""
        secret_id = self.bound_id
        with _secret_lock:
            if secret_id not in _secret_values:
                response = clients.client("secretsmanager").get_secret_value(SecretId=secret_id)
                _secret_values[secret_id] = response["SecretString"]
            return _secret_values[secret_id]


Resource = Union[Table, Grant, Secret]


def forget_secret_values() -> None:
    """Drop cached secret values (tests; a rotated secret is read again on the next cold start)."""
    with _secret_lock:
        _secret_values.clear()


def check_resources(agent_name: str, resources: object) -> tuple[Resource, ...]:
    """The declarations, validated as a whole: known kinds, names unique per kind.

    Raises:
        ResourceDeclarationError: naming ``agents.<agent>.resources``.
    """
    field = f"agents.{agent_name}.resources"
    if isinstance(resources, (str, bytes)) or not isinstance(resources, (tuple, list)):
        raise ResourceDeclarationError(f"{field}: expected a tuple of Table, Grant or Secret, got {type(resources).__name__}")
    seen: set[tuple[str, str]] = set()
    for item in resources:
        if not isinstance(item, (Table, Grant, Secret)):
            raise ResourceDeclarationError(f"{field}: {item!r} is not a Table, Grant or Secret")
        if isinstance(item, (Table, Secret)):
            key = (type(item).__name__, item.name)
            if key in seen:
                raise ResourceDeclarationError(f"{field}: two {key[0]} declarations named {item.name!r}")
            seen.add(key)
    return tuple(resources)
