from exporter.demo.run import main

raise SystemExit(main())
