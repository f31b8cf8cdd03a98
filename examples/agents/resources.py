"""An agent's resources: a table the stack creates and a secret, granted to its tool functions only."""

from pydantic import BaseModel

from longstep import Agent, Effect, Secret, Table, ToolContext, ToolRegistry, clients, tool

orders = Table("orders", partition_key="order_id")
payments_key = Secret("payments_api", secret_id="prod/payments/api-key")
registry = ToolRegistry()


class GetOrderArgs(BaseModel):
    order_id: str


@tool(registry, effect=Effect.READ)
def get_order(args: GetOrderArgs, ctx: ToolContext) -> dict:
    """Read one order."""
    # The table's physical name comes from this function's environment (LONGSTEP_TABLE_ORDERS).
    item = clients.client("dynamodb").get_item(TableName=orders.table_name, Key={"order_id": {"S": args.order_id}})
    return {"order_id": args.order_id, "found": "Item" in item}


def build() -> Agent:
    return Agent(name="orders", system_prompt="Answer questions about orders.", tools=registry, resources=(orders, payments_key))
