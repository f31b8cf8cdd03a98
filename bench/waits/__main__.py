from bench.waits.main import main

raise SystemExit(main())
