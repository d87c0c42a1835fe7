from konfig.cli import main

main()
