from scaleright.cli.main import main

main()
