"""For people: the command line, layout pictures, the packing doctor, the catalog, golden values
and the optional ptxas oracle. Never imported from the layers below."""
