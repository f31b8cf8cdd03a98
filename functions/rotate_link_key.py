"""Lambda handler: Secrets Manager's rotation of the link key (`longstep.link_key_rotation.rotate`)."""

from longstep import clients
from longstep.link_key_rotation import rotate


def lambda_handler(event, context):
    rotate(clients.client("secretsmanager"), event)
