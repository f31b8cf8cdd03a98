"""Resource declarations (``longstep.resources``): validation, variable names, run-time lookup."""

from __future__ import annotations

import pytest

from longstep import resources
from longstep.environment import use_environment
from longstep.resources import (
    READ_WRITE_ITEM_ACTIONS,
    Grant,
    ResourceDeclarationError,
    Secret,
    Table,
    UnboundResourceError,
    check_resources,
)


def test_a_table_defaults_to_item_actions_without_scan():
    table = Table("orders", partition_key="order_id")
    assert table.actions == READ_WRITE_ITEM_ACTIONS
    assert "dynamodb:Scan" not in table.actions
    assert table.variable == "LONGSTEP_TABLE_ORDERS"
    assert table.schema().key_schema() == [{"AttributeName": "order_id", "KeyType": "HASH"}]


def test_the_physical_name_comes_from_the_functions_environment():
    table = Table("orders", partition_key="order_id", sort_key="line")
    with use_environment({"LONGSTEP_TABLE_ORDERS": "Longstep-orders-1A2B"}):
        assert table.table_name == "Longstep-orders-1A2B"
    with use_environment({}), pytest.raises(UnboundResourceError, match="LONGSTEP_TABLE_ORDERS"):
        table.table_name


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Table("Orders", partition_key="id"), "Table.name"),
        (lambda: Table("orders-1", partition_key="id"), "Table.name"),
        (lambda: Table("orders", partition_key=""), "Table.partition_key"),
        (lambda: Table("orders", partition_key="id", actions=("s3:GetObject",)), "Table.actions"),
        (lambda: Table("orders", partition_key="id", actions="dynamodb:GetItem"), "Table.actions"),
        (lambda: Grant(actions=(), resources=("arn:aws:sqs:us-east-1:1:q",)), "Grant.actions"),
        (lambda: Grant(actions=("sqs:SendMessage",), resources=("my-queue",)), "Grant.resources"),
        (lambda: Secret("api", secret_id=" "), "Secret.secret_id"),
    ],
)
def test_a_bad_declaration_names_its_field(build, field):
    with pytest.raises(ResourceDeclarationError) as info:
        build()
    assert str(info.value).startswith(f"{field}:"), str(info.value)


def test_check_resources_refuses_duplicates_and_strangers():
    table = Table("orders", partition_key="id")
    assert check_resources("billing", (table, Secret("orders", "x"))) == (table, Secret("orders", "x"))
    with pytest.raises(ResourceDeclarationError, match=r"agents\.billing\.resources: two Table declarations named 'orders'"):
        check_resources("billing", (table, table))
    with pytest.raises(ResourceDeclarationError, match=r"agents\.billing\.resources: 'orders' is not"):
        check_resources("billing", ("orders",))


def test_a_secret_is_read_once_and_cached(monkeypatch):
    calls = []

    class FakeSecrets:
        def get_secret_value(self, SecretId):
            calls.append(SecretId)
            return {"SecretString": f"value-of-{SecretId}"}

    monkeypatch.setattr(resources.clients, "client", lambda service: FakeSecrets() if service == "secretsmanager" else None)
    resources.forget_secret_values()
    secret = Secret("payments_api", secret_id="prod/payments/api-key")
    with use_environment({secret.variable: "prod/payments/api-key"}):
        assert secret.value() == "value-of-prod/payments/api-key"
        assert secret.value() == "value-of-prod/payments/api-key"
    assert calls == ["prod/payments/api-key"]
    resources.forget_secret_values()
