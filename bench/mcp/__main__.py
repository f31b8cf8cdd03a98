from bench.mcp.run import main

raise SystemExit(main())
