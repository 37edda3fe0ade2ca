 

systembe brief


userhi