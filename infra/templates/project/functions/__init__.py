"""This project's agents (registered in cdk.json's ``longstep.agents``)."""
