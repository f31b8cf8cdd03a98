from bench.cost.run import main

raise SystemExit(main())
