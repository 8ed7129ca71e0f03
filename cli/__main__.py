from cli.main import app

if __name__ == "__main__":  # worker processes import this module again; only the command runs the app
    app()
