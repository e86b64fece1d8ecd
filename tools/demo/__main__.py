from tools.demo.run import main

raise SystemExit(main())
