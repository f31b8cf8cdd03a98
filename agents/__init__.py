"""The agents of this project (registered in cdk.json's ``longstep.agents``)."""
