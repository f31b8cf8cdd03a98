"""Speed benchmark (issue 13): the local loop vs durable functions' test runner and moto's engine."""
