from bench.storage.run import main

raise SystemExit(main())
