
ok À¯