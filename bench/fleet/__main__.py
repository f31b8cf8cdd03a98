from bench.fleet.run import main

raise SystemExit(main())
