from bench.loop.run import main

raise SystemExit(main())
