def sniff(lines):
    return False


def parse(path, options):
    return []
