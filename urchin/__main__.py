from urchin.cli import main

main()
