from cortex.cli import main

raise SystemExit(main())
