from halfmq_cli.main import main

main()
