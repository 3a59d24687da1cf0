import Overtime
print("placeholder")
