from bench.turns.run import main

raise SystemExit(main())
