def read(folder):
    raise NotImplementedError
