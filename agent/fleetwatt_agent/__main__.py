from fleetwatt_agent.cli import main

raise SystemExit(main())
