from bench.speed.run import main

raise SystemExit(main())
