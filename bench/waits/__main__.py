from bench.waits.run import main

raise SystemExit(main())
