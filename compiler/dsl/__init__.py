"""The schedule language: tensor expressions, schedules, the VTA environment and the numpy reference."""
