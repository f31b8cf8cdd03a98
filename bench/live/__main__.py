from bench.live.run import main

raise SystemExit(main())
